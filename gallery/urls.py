from django.urls import path

from gallery import views

app_name = "gallery"

urlpatterns = [
    path("", views.landing, name="landing"),
    path("worlds/", views.world_list, name="world_list"),
    path("worlds/<slug:slug>/", views.world_detail, name="world_detail"),
]
