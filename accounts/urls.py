from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("beta/apply/", views.beta_apply, name="beta_apply"),
    path("beta/thanks/", views.beta_thanks, name="beta_thanks"),
    path("invite/<str:token>/", views.invitation_accept, name="invitation_accept"),
    path("accounts/profile/", views.profile, name="profile"),
    path("accounts/api-keys/", views.api_key_create, name="api_key_create"),
    path("accounts/api-keys/<int:key_id>/revoke/", views.api_key_revoke, name="api_key_revoke"),
]
