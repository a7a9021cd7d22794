"""Response headers the whole site shares."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Adds settings.CONTENT_SECURITY_POLICY to every response that has none of its own
    (media responses set a stricter one)."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if settings.CONTENT_SECURITY_POLICY and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        return response
