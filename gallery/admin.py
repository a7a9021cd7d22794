from django.contrib import admin

from gallery.models import Tag, World
from gallery.services import world_media_schedule, world_save

MEDIA_STATE = ["media_status", "media_error", "media_version", "media_rendered_version"]


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name"]


@admin.register(World)
class WorldAdmin(admin.ModelAdmin):
    list_display = [
        "title",
        "theme",
        "seed",
        "is_published",
        "is_featured",
        "sort_order",
        "updated_at",
        "media_status",
    ]
    list_editable = ["is_published", "is_featured", "sort_order"]
    list_filter = ["is_published", "is_featured", "theme", "tags"]
    search_fields = ["title", "slug", "description"]
    prepopulated_fields = {"slug": ["title"]}
    filter_horizontal = ["tags"]
    readonly_fields = ["created_at", "updated_at", *MEDIA_STATE]
    actions = ["publish", "unpublish", "regenerate_media"]
    fieldsets = [
        (None, {"fields": ["title", "slug", "description", "tags"]}),
        (
            "What the engine starts from",
            {"fields": ["theme", "seed", "initial_prompt", "reference_image"]},
        ),
        ("Gallery", {"fields": ["is_published", "is_featured", "sort_order"]}),
        ("Generated media", {"fields": ["thumbnail", "preview", *MEDIA_STATE]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def save_model(self, request, obj, form, change):
        world_save(world=obj)  # redraws the gallery media when the world's look changed

    @admin.action(description="Publish selected worlds")
    def publish(self, request, queryset):
        updated = queryset.update(is_published=True)
        self.message_user(request, f"Published {updated} world(s).")

    @admin.action(description="Unpublish selected worlds (also un-features them)")
    def unpublish(self, request, queryset):
        updated = queryset.update(is_published=False, is_featured=False)
        self.message_user(request, f"Unpublished {updated} world(s).")

    @admin.action(description="Regenerate thumbnail and preview")
    def regenerate_media(self, request, queryset):
        for world in queryset:
            world_media_schedule(world=world)
        self.message_user(request, f"Queued new gallery media for {queryset.count()} world(s).")
