from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from sessions import services
from sessions.models import PlaySession, UserQuota


@admin.register(PlaySession)
class PlaySessionAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "world", "state", "created_at", "started_at", "seconds_used"]
    list_filter = ["state", "world", "created_at"]
    search_fields = ["owner__username", "world__title", "id"]
    list_select_related = ["owner", "world"]
    actions = ["end_sessions"]
    readonly_fields = [
        "id",
        "owner",
        "world",
        "state",
        "created_at",
        "started_at",
        "ended_at",
        "allowed_seconds",
        "seconds_used",
        "end_reason",
    ]

    def has_add_permission(self, request) -> bool:
        return False  # sessions start from the play page, through the quota services

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # state changes only through services (the "end" action)

    @admin.action(description="End selected sessions now")
    def end_sessions(self, request, queryset):
        active = [session for session in queryset if session.is_active]
        for session in active:
            services.session_end(
                session=session, reason=f"Ended by an administrator ({request.user})."
            )
        self.message_user(request, f"Ended {len(active)} session(s).")
        if len(active) < queryset.count():
            self.message_user(
                request, "Sessions that had already finished were left alone.", messages.WARNING
            )


@admin.register(UserQuota)
class UserQuotaAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "play_seconds_per_day",
        "concurrent_sessions",
        "max_session_seconds",
        "exports_per_day",
    ]
    search_fields = ["user__username", "user__email"]
    autocomplete_fields = ["user"]


class UserQuotaInline(admin.StackedInline):
    model = UserQuota
    can_delete = True
    extra = 0
    max_num = 1
    verbose_name_plural = "quota overrides (blank = site default)"


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class MemberAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, UserQuotaInline]
