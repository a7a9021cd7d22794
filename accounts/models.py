from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone


class BetaApplication(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    email = models.EmailField()
    name = models.CharField(max_length=120)
    intent = models.TextField("what they want to do", max_length=2000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One application per address, whatever its case: a second one is answered, not kept.
            models.UniqueConstraint(Lower("email"), name="beta_application_unique_email"),
        ]

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


class Invitation(models.Model):
    """A single-use, expiring invitation. Only a hash of the token is stored."""

    class State(models.TextChoices):
        VALID = "valid", "Valid"
        USED = "used", "Used"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    email = models.EmailField()
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    application = models.ForeignKey(
        BetaApplication,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitations",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitation",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Invitation for {self.email}"

    @property
    def state(self) -> "Invitation.State":
        if self.used_at:
            return self.State.USED
        if self.revoked_at:
            return self.State.REVOKED
        if self.expires_at <= timezone.now():
            return self.State.EXPIRED
        return self.State.VALID


class ApiKey(models.Model):
    """A member's key for the developer API. Only its SHA-256 is stored: the key itself is shown
    once, when it is made. A key acts as its owner, with the owner's quotas, nothing more."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=80)
    prefix = models.CharField(
        max_length=12, help_text="The key's first characters, to tell it apart."
    )
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
