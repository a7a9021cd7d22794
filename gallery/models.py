from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.urls import reverse

from gallery.validators import validate_preview_video, validate_reference_image
from worldsite.engine_gateway.constants import THEMES

THEME_CHOICES = [(theme.name, theme.label) for theme in THEMES]

# Seeds travel to the engine as numpy seeds; keep them in a range every backend stores exactly.
MAX_SEED = 2**31 - 1


class Tag(models.Model):
    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=40)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MediaStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RENDERING = "rendering", "Rendering"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


# Changing any of these changes how the world looks, so its gallery media are drawn again.
LOOK_FIELDS = ("theme", "seed", "initial_prompt", "reference_image")


class World(models.Model):
    """A playable world: what the gallery shows and what the engine starts a session from."""

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=120)
    description = models.TextField(max_length=2000, blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="worlds")

    theme = models.CharField(max_length=40, choices=THEME_CHOICES)
    seed = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_SEED)])
    initial_prompt = models.CharField(
        max_length=300,
        blank=True,
        help_text="Text the engine receives at the first frame, e.g. 'a calm morning'.",
    )
    reference_image = models.ImageField(
        upload_to="worlds/reference/",
        blank=True,
        validators=[validate_reference_image],
        help_text="Optional PNG/JPEG/WebP that sets the world's palette.",
    )

    is_published = models.BooleanField(default=False)
    is_featured = models.BooleanField(default=False)
    sort_order = models.IntegerField(default=0, help_text="Lower comes first in the gallery.")

    # Drawn by the gallery media job (gallery.tasks); a painted card stands in until then.
    thumbnail = models.ImageField(upload_to="worlds/thumbnails/", blank=True)
    preview = models.FileField(
        upload_to="worlds/previews/", blank=True, validators=[validate_preview_video]
    )
    media_version = models.PositiveIntegerField(
        default=0, help_text="Bumped whenever a look-defining field changes."
    )
    media_rendered_version = models.PositiveIntegerField(default=0)
    media_status = models.CharField(
        max_length=10, choices=MediaStatus.choices, default=MediaStatus.PENDING
    )
    media_error = models.CharField(max_length=300, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["sort_order", "title"]
        indexes = [models.Index(fields=["is_published", "sort_order"])]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("gallery:world_detail", kwargs={"slug": self.slug})

    def clean(self) -> None:
        if self.is_featured and not self.is_published:
            raise ValidationError({"is_featured": "Only a published world can be featured."})
        if self.initial_prompt and not self.initial_prompt.strip():
            raise ValidationError({"initial_prompt": "The prompt is only whitespace."})

    @classmethod
    def from_db(cls, db, field_names, values):
        world = super().from_db(db, field_names, values)
        world._loaded_look = world.look_signature()
        return world

    def look_signature(self) -> tuple:
        return tuple(str(getattr(self, field)) for field in LOOK_FIELDS)

    def look_changed(self) -> bool:
        """True for a new world, or when a look field differs from what was loaded."""
        return getattr(self, "_loaded_look", None) != self.look_signature()

    def mark_look_saved(self) -> None:
        """The current look is what is stored (gallery.services.world_save calls this)."""
        self._loaded_look = self.look_signature()
