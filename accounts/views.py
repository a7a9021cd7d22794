from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django.views.generic.edit import FormView

from accounts import selectors, services
from accounts.forms import ApiKeyForm, BetaApplicationForm, InvitationSignupForm
from sessions import selectors as session_selectors
from worldsite.ratelimits import rate_limited

# Status codes for the "this link can't be used" page: gone for links that once worked.
INVITATION_PROBLEM_STATUS = {"unknown": 404, "used": 410, "revoked": 410, "expired": 410}


@require_http_methods(["GET", "POST"])
@rate_limited("beta_apply")
def beta_apply(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("gallery:world_list")
    form = BetaApplicationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        services.beta_application_submit(**form.cleaned_data)
        return redirect("accounts:beta_thanks")
    return render(request, "accounts/beta_apply.html", {"form": form})


def beta_thanks(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/beta_thanks.html")


@require_http_methods(["GET", "POST"])
def invitation_accept(request: HttpRequest, token: str) -> HttpResponse:
    try:
        invitation = services.invitation_check(token=token)
    except services.InvitationInvalid as problem:
        return _invitation_problem(request, problem)

    form = InvitationSignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.invitation_accept(
                token=token,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
            )
        except services.InvitationInvalid as problem:
            return _invitation_problem(request, problem)
        except ValidationError as error:
            _attach_errors(form, error)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("gallery:world_list")
    return render(
        request, "accounts/invitation_accept.html", {"form": form, "invitation": invitation}
    )


def _invitation_problem(request: HttpRequest, problem: services.InvitationInvalid) -> HttpResponse:
    status = INVITATION_PROBLEM_STATUS.get(problem.state, 404)
    context = {"message": problem.message, "state": problem.state}
    return render(request, "accounts/invitation_problem.html", context, status=status)


def _attach_errors(form: InvitationSignupForm, error: ValidationError) -> None:
    if hasattr(error, "error_dict"):
        for field, messages in error.message_dict.items():
            form.add_error(field if field in form.fields else None, messages)
    else:
        form.add_error("password1", error.messages)


@login_required
def profile(request: HttpRequest, api_key_form: ApiKeyForm | None = None) -> HttpResponse:
    context = {
        "usage": session_selectors.quota_usage(user=request.user),
        "sessions": session_selectors.session_list_for_owner(owner=request.user)[:50],
        "exports": session_selectors.export_list_for_owner(owner=request.user)[:30],
        "api_keys": selectors.api_key_list_for_owner(owner=request.user),
        "api_key_form": api_key_form or ApiKeyForm(),
    }
    return render(request, "accounts/profile.html", context, status=400 if api_key_form else 200)


@login_required
@require_POST
def api_key_create(request: HttpRequest) -> HttpResponse:
    """Make a key and show it on this one response (no redirect: the key is never stored)."""
    form = ApiKeyForm(request.POST)
    if form.is_valid():
        try:
            key, raw_key = services.api_key_create(owner=request.user, **form.cleaned_data)
        except ValidationError as error:
            form.add_error(None, error)
        else:
            context = {"key": key, "raw_key": raw_key}
            response = render(request, "accounts/api_key_created.html", context, status=201)
            response["Cache-Control"] = "no-store"
            return response
    return profile(request, api_key_form=form)


@login_required
@require_POST
def api_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    key = selectors.api_key_list_for_owner(owner=request.user).filter(pk=key_id).first()
    if key is None:
        raise Http404("You have no such API key.")
    if services.api_key_revoke(key=key):
        messages.success(request, f"The key “{key.name}” is revoked; calls using it now fail.")
    return redirect(reverse("accounts:profile") + "#api-keys")


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset view, with the e-mailed link built from WORLDSITE_SITE_URL: never from the
    request's Host header (a visitor controls it) nor its scheme (http behind a TLS proxy)."""

    email_template_name = "registration/password_reset_email.txt"

    def form_valid(self, form):
        site = urlsplit(settings.SITE_URL)
        form.save(
            domain_override=site.netloc,
            use_https=site.scheme == "https",
            token_generator=self.token_generator,
            from_email=self.from_email,
            email_template_name=self.email_template_name,
            subject_template_name=self.subject_template_name,
            request=self.request,
            html_email_template_name=self.html_email_template_name,
            extra_email_context={"site_url": settings.SITE_URL},
        )
        return FormView.form_valid(self, form)  # the redirect, without sending a second mail
