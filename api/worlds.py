"""GET /api/v1/worlds/: the published worlds, a page at a time."""

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router, Schema

from api.problems import Problem
from api.schemas import WorldOut, WorldPage
from gallery import selectors as gallery_selectors
from gallery.models import World

router = Router(tags=["worlds"])
PAGE_SIZE = 24


class PageQuery(Schema):
    page: int = 1


def world_out(request: HttpRequest, world: World) -> WorldOut:
    return WorldOut(
        slug=world.slug,
        title=world.title,
        description=world.description,
        tags=[tag.slug for tag in world.tags.all()],
        theme=world.theme,
        thumbnail_url=request.build_absolute_uri(world.thumbnail.url) if world.thumbnail else None,
    )


@router.get("/", response=WorldPage, url_name="worlds", summary="List published worlds")
def world_list(request: HttpRequest, query: Query[PageQuery]) -> WorldPage:
    """Published worlds in gallery order, 24 a page (`?page=2`...)."""
    paginator = Paginator(gallery_selectors.world_list_published(), PAGE_SIZE)
    if not 1 <= query.page <= paginator.num_pages:
        raise Problem(
            404, f"There are {paginator.num_pages} page(s); page {query.page} is not one."
        )
    page = paginator.page(query.page)
    next_url = None
    if page.has_next():
        next_url = request.build_absolute_uri(
            f"{reverse('api:worlds')}?page={page.next_page_number()}"
        )
    return WorldPage(
        items=[world_out(request, world) for world in page.object_list],
        count=paginator.count,
        page=page.number,
        pages=paginator.num_pages,
        next=next_url,
    )
