"""Weak and published passwords are refused (item 15 of "Trust"); the demo's people exist only in the demo."""
import pytest
from django.contrib.auth import password_validation
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from durable.tools.demo.setup import DEMO_PASSWORD, DEMO_USERNAME, REVIEWER_USERNAME


@pytest.mark.parametrize("password", ["password1", "12345678", DEMO_PASSWORD, "DURABLE-DEMO", "123456789012",
                                      "short-pw"])
def test_weak_common_numeric_short_and_published_passwords_are_refused(password):
    with pytest.raises(ValidationError):
        password_validation.validate_password(password)


def test_a_long_uncommon_password_is_accepted():
    password_validation.validate_password("correct horse battery staple")


@pytest.mark.django_db
def test_migrating_creates_no_demo_user():
    assert not User.objects.filter(username__in=[DEMO_USERNAME, REVIEWER_USERNAME, "intake"]).exists()
