from django import forms
from django.contrib.auth.validators import UnicodeUsernameValidator


class BetaApplicationForm(forms.Form):
    email = forms.EmailField(max_length=254)
    name = forms.CharField(max_length=120)
    intent = forms.CharField(
        label="What do you want to do with Worldsite?",
        min_length=10,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 5}),
        error_messages={"min_length": "Tell us a little more (at least 10 characters)."},
    )


class InvitationSignupForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        help_text="Letters a-z, digits and @/./+/-/_ only.",
    )
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput, strip=False)

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("password1") and cleaned.get("password1") != cleaned.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return cleaned


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=80,
        label="Key name",
        help_text="What will use it, e.g. “my game's server”.",
    )
