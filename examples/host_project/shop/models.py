"""The shop's users: a custom user model from the first migration, as Django recommends."""
from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    team = models.CharField(max_length=50, blank=True, help_text="the shop team the user works in")
