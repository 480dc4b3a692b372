"""The shop's own pages (durable's console lives under /ops/)."""
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html")
