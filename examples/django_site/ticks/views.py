"""``GET /ticks/``: the newest rows the job wrote."""

from django.http import HttpRequest, JsonResponse

from .models import Tick


def ticks(request: HttpRequest) -> JsonResponse:
    """The newest 100 rows, newest first."""
    rows = Tick.objects.order_by("-slot").values("job", "slot", "pid")[:100]
    return JsonResponse({"ticks": list(rows)})
