import uuid

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.core.validators import MinValueValidator
from django.db import models


class ExportStorage(FileSystemStorage):
    """Finished exports live outside MEDIA_ROOT: they are served only through a permission
    check (sessions.views.export_download), never as public media. The folder is read from
    settings on every use, so tests and deployments can move it."""

    @property
    def base_location(self):
        return settings.EXPORTS_ROOT

    @property
    def location(self):
        return str(settings.EXPORTS_ROOT)


def export_storage() -> FileSystemStorage:
    return ExportStorage()


class PlaySession(models.Model):
    """One player in one world. State changes go through sessions.services only."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        STARTING = "starting", "Starting"
        LIVE = "live", "Live"
        ENDED = "ended", "Ended"
        FAILED = "failed", "Failed"

    ACTIVE_STATES = (State.QUEUED, State.STARTING, State.LIVE)
    # States that hold a slot of the site-wide engine capacity.
    RUNNING_STATES = (State.STARTING, State.LIVE)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="play_sessions"
    )
    world = models.ForeignKey("gallery.World", on_delete=models.PROTECT, related_name="sessions")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When it went live.")
    ended_at = models.DateTimeField(null=True, blank=True)
    allowed_seconds = models.PositiveIntegerField(
        default=0, help_text="Longest this session may run, fixed when it was admitted."
    )
    seconds_used = models.PositiveIntegerField(default=0)
    end_reason = models.CharField(max_length=200, blank=True)
    # Which engine worker runs the session, and when it last said it was alive.
    worker_name = models.CharField(max_length=100, blank=True)
    worker_channel = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When it was admitted (became `starting`) and when a page last connected to it: the
    # housekeeping job ends sessions that nobody will ever open (services.sessions_end_abandoned).
    admitted_at = models.DateTimeField(null=True, blank=True)
    page_seen_at = models.DateTimeField(null=True, blank=True)
    # Inputs sent through the API's input_url: the last one's id, which the worker reports back
    # (heartbeat `last_seq`) once the engine has applied it.
    api_inputs_sent = models.PositiveBigIntegerField(default=0)
    # What the player chose instead of the world's own seed and reference picture (the API's
    # `seed` and `reference_image`); the picture is already shrunk to the engine's small PNG.
    seed = models.PositiveIntegerField(null=True, blank=True)
    reference_png = models.BinaryField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["state", "created_at"]),
            models.Index(fields=["owner", "state"]),
        ]

    def __str__(self) -> str:
        return f"{self.owner} in {self.world} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES


class UserQuota(models.Model):
    """Per-user overrides of the site-wide quota defaults; a blank field means 'use the default'."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota"
    )
    play_seconds_per_day = models.PositiveIntegerField(null=True, blank=True)
    concurrent_sessions = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )
    max_session_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(10)]
    )
    exports_per_day = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "user quota"

    def __str__(self) -> str:
        return f"Quota for {self.user}"


class SessionExport(models.Model):
    """A video file made from a past session by a Celery job; private to its owner."""

    class Kind(models.TextChoices):
        RECORDING = "recording", "What was streamed"
        RERENDER = "rerender", "Re-rendered from the inputs"

    class Quality(models.TextChoices):
        STANDARD = "standard", "Standard"
        HIGH = "high", "High"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Ready"
        FAILED = "failed", "Failed"
        EXPIRED = "expired", "Expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(PlaySession, on_delete=models.CASCADE, related_name="exports")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="exports"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.RECORDING)
    quality = models.CharField(max_length=10, choices=Quality.choices, default=Quality.STANDARD)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    file = models.FileField(storage=export_storage, upload_to="", blank=True)
    error = models.CharField(max_length=300, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "created_at"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"Export of {self.session} ({self.status})"


def new_room_code() -> str:
    """The room's part of its share link (/live/<code>/): short, unguessable, URL-safe."""
    import secrets

    return secrets.token_urlsafe(9)


class LiveRoom(models.Model):
    """A live session opened to an audience: the share link, who may watch, how it is steered.

    A room has no engine of its own: its viewers watch its session's stream (relayed by the
    session's worker), and it ends with its session. Changes go through sessions.room_services.
    """

    class Visibility(models.TextChoices):
        PRIVATE = "private", "Private: invited members only"
        LISTED = "listed", "Listed in Live now: any member"

    class Steering(models.TextChoices):
        HOST = "host", "The host applies audience prompts"
        AUDIENCE = "audience", "Audience steers: the most-supported prompt of each round"

    code = models.CharField(max_length=20, unique=True, default=new_room_code, editable=False)
    session = models.OneToOneField(PlaySession, on_delete=models.CASCADE, related_name="room")
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    steering = models.CharField(max_length=10, choices=Steering.choices, default=Steering.HOST)
    # Audience steering: when the current 10-second round began.
    round_started_at = models.DateTimeField(null=True, blank=True)
    invited = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="room_invitations"
    )
    removed = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="rooms_removed_from"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Live room {self.code} ({self.session})"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("sessions:live_room", args=[self.code])


class RoomViewer(models.Model):
    """One open connection of a spectator to a room (a room page's socket, or a WHEP pull):
    what the viewer count counts. Deleted when the connection goes away."""

    room = models.ForeignKey(LiveRoom, on_delete=models.CASCADE, related_name="viewers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    channel = models.CharField(max_length=200, unique=True)
    connected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["room", "user"])]

    def __str__(self) -> str:
        return f"{self.user} watching {self.room.code}"


class AudiencePrompt(models.Model):
    """A sentence a spectator sent into a room's queue; the host (or a round) may apply it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting"
        APPLIED = "applied", "Applied"
        DROPPED = "dropped", "Dropped"

    class AppliedBy(models.TextChoices):
        HOST = "host", "the host"
        AUDIENCE = "audience", "the audience's vote"

    room = models.ForeignKey(LiveRoom, on_delete=models.CASCADE, related_name="prompts")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    text = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    applied_by = models.CharField(max_length=10, choices=AppliedBy.choices, blank=True)
    supporters = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="supported_prompts"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["room", "status"])]

    def __str__(self) -> str:
        return f"{self.author}: {self.text[:40]} ({self.status})"
