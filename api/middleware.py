"""Problem details for errors raised outside django-ninja's operations (api/problems.py)."""

from collections.abc import Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware

from api.problems import as_problem


@sync_and_async_middleware
def problem_details_middleware(get_response: Callable) -> Callable:
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponse:
            response = await get_response(request)
            return as_problem(request, response)

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponse:
        return as_problem(request, get_response(request))

    return middleware
