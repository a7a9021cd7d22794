from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from gallery import selectors


def landing(request: HttpRequest) -> HttpResponse:
    context = {"featured": selectors.world_list_featured(limit=3)}
    return render(request, "gallery/landing.html", context)


def world_list(request: HttpRequest) -> HttpResponse:
    tag = request.GET.get("tag", "").strip()[:40]
    query = request.GET.get("q", "").strip()[:120]
    context = {
        "worlds": selectors.world_list_published(tag=tag, query=query),
        "tags": selectors.tag_list_in_use(),
        "active_tag": tag,
        "query": query,
    }
    return render(request, "gallery/world_list.html", context)


def world_detail(request: HttpRequest, slug: str) -> HttpResponse:
    world = selectors.world_get_published(slug=slug)
    if world is None:
        raise Http404("No published world has that address.")
    return render(request, "gallery/world_detail.html", {"world": world})
