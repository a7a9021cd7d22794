from django import forms
from django.contrib import admin, messages

from accounts import services
from accounts.models import ApiKey, BetaApplication, Invitation


@admin.register(BetaApplication)
class BetaApplicationAdmin(admin.ModelAdmin):
    list_display = ["email", "name", "status", "created_at", "reviewed_at"]
    list_filter = ["status", "created_at"]
    search_fields = ["email", "name", "intent"]
    readonly_fields = ["email", "name", "intent", "created_at", "reviewed_at", "reviewed_by"]
    actions = ["approve", "reject"]

    def has_add_permission(self, request) -> bool:
        return False  # applications come from the public form

    @admin.action(description="Approve and e-mail an invitation")
    def approve(self, request, queryset):
        issued = services.beta_applications_approve(applications=queryset, reviewer=request.user)
        skipped = queryset.count() - len(issued)
        self.message_user(request, f"Approved {len(issued)} application(s); invitations e-mailed.")
        if skipped:
            self.message_user(
                request, f"{skipped} were already reviewed and were left alone.", messages.WARNING
            )

    @admin.action(description="Reject")
    def reject(self, request, queryset):
        rejected = services.beta_applications_reject(applications=queryset, reviewer=request.user)
        self.message_user(request, f"Rejected {rejected} application(s).")


class InvitationAddForm(forms.ModelForm):
    class Meta:
        model = Invitation
        fields = ["email"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "state_label", "created_at", "expires_at", "used_by"]
    list_filter = ["created_at", "expires_at"]
    search_fields = ["email"]
    actions = ["revoke"]
    readonly_fields = [
        "email",
        "application",
        "created_by",
        "created_at",
        "expires_at",
        "used_at",
        "used_by",
        "revoked_at",
    ]

    @admin.display(description="state")
    def state_label(self, obj: Invitation) -> str:
        return obj.state.label

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = InvitationAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request, obj=None):
        return ["email"] if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        if change:
            return  # invitations are immutable once sent; revoke and invite again instead
        issued = services.invitation_create(
            email=form.cleaned_data["email"],
            created_by=request.user,
        )
        obj.pk = issued.invitation.pk
        self.message_user(request, f"Invitation e-mailed to {issued.invitation.email}.")

    @admin.action(description="Revoke selected invitations")
    def revoke(self, request, queryset):
        revoked = services.invitations_revoke(invitations=queryset)
        self.message_user(request, f"Revoked {revoked} invitation(s).")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are made by their owners (profile page, `apikey_create`); admins see and revoke."""

    list_display = ["name", "owner", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at", "created_at"]
    search_fields = ["name", "prefix", "owner__username"]
    readonly_fields = ["owner", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        revoked = sum(services.api_key_revoke(key=key) for key in queryset)
        self.message_user(request, f"Revoked {revoked} key(s).")
