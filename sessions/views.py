from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from gallery import selectors as gallery_selectors
from gallery.validators import validate_reference_image
from sessions import channel_messages as session_messages
from sessions import export_services, room_selectors, room_services, selectors, services
from sessions.models import LiveRoom, SessionExport
from sessions.room_selectors import ACCESS_REFUSALS, RoomAccess
from sessions.services import Decision
from worldsite.engine_gateway.constants import suggested_prompts
from worldsite.engine_gateway.pictures import shrink_to_png
from worldsite.ratelimits import rate_limited


@login_required
@require_POST
@rate_limited("play_start")
def play_start(request: HttpRequest, slug: str) -> HttpResponse:
    world = gallery_selectors.world_get_published(slug=slug)
    if world is None:
        raise Http404("No published world has that address.")
    reservation = services.session_reserve(user=request.user, world=world)
    if reservation.decision == Decision.REFUSE:
        messages.error(request, reservation.reason)
        return redirect(world.get_absolute_url())
    return redirect("sessions:play", session_id=reservation.session.pk)


@login_required
def play_page(request: HttpRequest, session_id) -> HttpResponse:
    session = selectors.session_get_for_owner(session_id=session_id, owner=request.user)
    if session is None:
        raise Http404("This play session does not exist or is not yours.")
    context = {
        "session": session,
        "world": session.world,
        "usage": selectors.quota_usage(user=request.user),
        "suggested_prompts": suggested_prompts(session.world.theme),
        "ice_servers": settings.WEBRTC_ICE_SERVERS,
        "room": room_selectors.room_for_session(session=session),
        "visibilities": LiveRoom.Visibility.choices,
    }
    return render(request, "sessions/play.html", context)


def _room_json(request: HttpRequest, room: LiveRoom) -> dict:
    return {
        "code": room.code,
        "url": request.build_absolute_uri(room.get_absolute_url()),
        "ws_path": f"/ws/live/{room.code}/",
        "visibility": room.visibility,
        "invited": sorted(room.invited.values_list("username", flat=True)),
    }


@login_required
@require_POST
@rate_limited("room_open")
def room_open(request: HttpRequest, session_id) -> JsonResponse:
    """The play page's Live room panel: open the session as a live room, or change who may
    watch it (visibility, invited members)."""
    session = selectors.session_get_for_owner(session_id=session_id, owner=request.user)
    if session is None:
        return JsonResponse({"error": "This play session does not exist."}, status=404)
    invite = [name for name in request.POST.get("invite", "").replace(",", " ").split() if name]
    try:
        room = room_services.room_open(
            session=session, visibility=request.POST.get("visibility") or None, invite=invite
        )
    except room_services.RoomRefused as refusal:
        status = 409 if not session.is_active else 400
        return JsonResponse({"error": str(refusal)}, status=status)
    return JsonResponse(_room_json(request, room))


@login_required
def live_room(request: HttpRequest, code: str) -> HttpResponse:
    """A live room's share link: spectators watch the host's stream and suggest prompts."""
    room = room_selectors.room_get(code=code)
    if room is None:
        raise Http404("No live room has this address. Check the link with the host.")
    access = room_selectors.room_access(room=room, user=request.user)
    if access == RoomAccess.HOST:
        return redirect("sessions:play", session_id=room.session_id)
    if access in ACCESS_REFUSALS:
        return render(
            request,
            "403.html",
            {"title": "You can't watch this room", "message": ACCESS_REFUSALS[access]},
            status=403,
        )
    context = {
        "room": room,
        "session": room.session,
        "world": room.session.world,
        "host": room.session.owner,
        "is_open": room_selectors.room_is_open(room=room),
        "ice_servers": settings.WEBRTC_ICE_SERVERS,
        "round_seconds": room_selectors.ROUND_SECONDS,
    }
    return render(request, "sessions/live_room.html", context)


@login_required
@require_POST
@rate_limited("play_image")
def play_image(request: HttpRequest, session_id) -> JsonResponse:
    """A reference image dropped on the play page: validated, shrunk, sent to the worker."""
    session = selectors.session_get_for_owner(session_id=session_id, owner=request.user)
    if session is None:
        return JsonResponse({"error": "This play session does not exist."}, status=404)
    if not session.is_active or not session.worker_channel:
        return JsonResponse({"error": "The world is not running."}, status=409)
    upload = request.FILES.get("image")
    if upload is None:
        return JsonResponse({"error": "Attach an image file named 'image'."}, status=400)
    try:
        validate_reference_image(upload)
    except ValidationError as error:
        return JsonResponse({"error": error.messages[0]}, status=400)
    png, width, height = shrink_to_png(upload)
    async_to_sync(get_channel_layer().send)(
        session.worker_channel,
        session_messages.engine_image(session_id=str(session.pk), png=png),
    )
    return JsonResponse({"ok": True, "width": width, "height": height})


@login_required
@require_POST
@rate_limited("export_start")
def export_start(request: HttpRequest, session_id) -> HttpResponse:
    session = selectors.session_get_for_owner(session_id=session_id, owner=request.user)
    if session is None:
        raise Http404("This play session does not exist or is not yours.")
    try:
        export_services.export_request(
            user=request.user,
            session=session,
            kind=request.POST.get("kind", SessionExport.Kind.RECORDING),
            quality=request.POST.get("quality", SessionExport.Quality.STANDARD),
        )
    except export_services.ExportRefused as refusal:
        messages.error(request, str(refusal))
    else:
        messages.success(request, "Your video is being made; it appears below when ready.")
    return redirect(reverse("accounts:profile") + "#exports")


def _export_for(request: HttpRequest, export_id) -> SessionExport:
    export = SessionExport.objects.filter(pk=export_id).select_related("session__world").first()
    if export is None or not (export.owner_id == request.user.pk or request.user.is_staff):
        raise Http404("No such export.")
    return export


@login_required
def export_status(request: HttpRequest, export_id) -> JsonResponse:
    export = _export_for(request, export_id)
    if export.status == SessionExport.Status.RUNNING:
        export_services.exports_recover_stalled()  # the page's polling also notices dead jobs
        export.refresh_from_db()
    return JsonResponse(
        {
            "status": export.status,
            "status_label": export.get_status_display(),
            "progress": export.progress,
            "error": export.error,
            "download_url": reverse("sessions:export_download", args=[export.pk])
            if export.status == SessionExport.Status.DONE
            else None,
        }
    )


@login_required
def export_download(request: HttpRequest, export_id) -> FileResponse:
    export = _export_for(request, export_id)
    if export.status == SessionExport.Status.EXPIRED:
        raise Http404("This export has expired and its file was deleted.")
    if export.status != SessionExport.Status.DONE or not export.file:
        raise Http404("This export is not ready.")
    return FileResponse(
        export.file.open("rb"),
        as_attachment=True,
        filename=export.file.name.rsplit("/", 1)[-1],
        content_type="video/mp4",
    )
