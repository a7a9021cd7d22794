from django.urls import path

from api.site import api
from api.views import api_docs

urlpatterns = [
    path("api/", api_docs, name="api_docs"),
    path("api/v1/", api.urls),
]
