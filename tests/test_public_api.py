import elicitor


def test_all_is_sorted_and_exported() -> None:
    assert elicitor.__all__ == sorted(elicitor.__all__, key=str.casefold) or elicitor.__all__ == sorted(
        elicitor.__all__
    )
    for name in elicitor.__all__:
        assert hasattr(elicitor, name), name


def test_all_lists_every_public_member() -> None:
    public = {
        name
        for name, value in vars(elicitor).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("elicitor")
    }
    assert public <= set(elicitor.__all__)
