from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from gallery.models import World
from gallery.services import world_media_schedule


@receiver(post_save, sender=World)
def world_saved(sender, instance: World, created: bool, **kwargs) -> None:
    """New worlds, and worlds whose look changed, get their gallery media drawn again."""
    if settings.WORLD_MEDIA_AUTO and (created or instance.look_changed()):
        world_media_schedule(world=instance)
        instance._loaded_look = instance.look_signature()
