"""Configuration: defaults, round-trip through config.toml, and clear errors naming the key and the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.storage.atomic import write_atomic
from app.storage.config import (
    Config,
    ConfigError,
    config_from_flat,
    load_config,
    render_config,
    set_value,
    settings_registry,
)
from app.storage.paths import sharpen_paths


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "config.toml") == Config()


def test_set_then_load_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert set_value(path, "ar.n_ctx", "4096") == 4096
    assert set_value(path, "complete.temperature", "0.3") == pytest.approx(0.3)
    assert set_value(path, "models.complete", "~/models/other.gguf") == "~/models/other.gguf"
    config = load_config(path)
    assert config.ar.n_ctx == 4096
    assert config.complete.temperature == pytest.approx(0.3)
    assert config.models.complete == "~/models/other.gguf"
    assert config.ar.n_threads == Config().ar.n_threads  # untouched keys keep their defaults
    assert "n_ctx = 4096" in path.read_text()


def test_render_and_flat_forms_round_trip(tmp_path: Path) -> None:
    config = config_from_flat({"ar.n_ctx": 1024, "chat.max_tokens": 99, "diffusion.threshold": 0.5})
    path = tmp_path / "config.toml"
    path.write_text(render_config(config))
    assert load_config(path) == config
    assert "n_ctx = 1024" in render_config(config)
    assert "threshold = 0.0" in render_config(Config()), "None is written as the option's off value"


def test_every_default_passes_its_own_check() -> None:
    for spec in settings_registry().values():
        assert spec.check is None or spec.check(spec.default) is None, spec.key


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[ar]\nn_ctx = 'big'\n", "ar.n_ctx must be a whole number, got 'big'"),
        ("[ar]\nn_ctx = 10\n", "ar.n_ctx must be at least 256, got 10"),
        ("[complete]\ntemperature = 7\n", "complete.temperature must be between 0.0 and 2.0"),
        ("[ar]\nn_ctx = true\n", "ar.n_ctx must be a whole number"),
        ("[ar]\ncontext = 4096\n", "unknown key 'ar.context'"),
        ("[nope]\nx = 1\n", "unknown key 'nope.x'"),
        ("ar = 3\n", "'ar' must be a [section] table"),
        ("[ar\n", "not valid TOML"),
    ],
)
def test_invalid_files_name_the_key_and_the_file(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert message in str(raised.value)
    assert str(path) in str(raised.value)


def test_set_refuses_bad_values_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    set_value(path, "ar.n_ctx", "1024")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"ar\.n_ctx must be a whole number, got 'lots'"):
        set_value(path, "ar.n_ctx", "lots")
    with pytest.raises(ConfigError, match=r"unknown key 'ar\.size'"):
        set_value(path, "ar.size", "1")
    assert path.read_bytes() == before


def test_unwritable_config_dir_gives_a_clear_error(tmp_path: Path) -> None:
    # Tests run as root, where permission bits do not stop a write; a file standing where the folder
    # should be fails the same way for every user.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write the config file") as raised:
        set_value(blocker / "config" / "config.toml", "ar.n_ctx", "1024")
    assert "SHARPEN_HOME" in str(raised.value)


def test_sharpen_home_moves_every_dir(sharpen_home: Path) -> None:
    paths = sharpen_paths()
    for folder in (paths.config_dir, paths.data_dir, paths.state_dir, paths.cache_dir):
        assert folder.is_relative_to(sharpen_home)
    assert paths.config_file == sharpen_home / "config" / "config.toml"


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "doc.txt"
    write_atomic(target, b"first")
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.txt"]


def test_atomic_write_keeps_a_files_permissions_and_gives_a_new_one_the_usual(tmp_path: Path) -> None:
    shared = tmp_path / "shared.txt"
    shared.write_bytes(b"old")
    shared.chmod(0o640)
    write_atomic(shared, b"new")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    umask = os.umask(0o022)  # the test's own process: no other thread writes files meanwhile
    try:
        fresh = tmp_path / "fresh.txt"
        write_atomic(fresh, b"text")
        plain = tmp_path / "plain.txt"
        plain.write_bytes(b"text")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("prefix_cache = false", "none"),
        ("prefix_cache = true", "dual"),
        ('torch_cache = "prefix"', "prefix"),
        ('torch_cache = "dual"\ncache = "none"', "none"),  # the key that replaced it wins
        ('torch_cache = "dual"\nprefix_cache = false', "none"),  # among old keys, prefix_cache
    ],
)
def test_the_cache_keys_of_an_earlier_sharpen_still_load(tmp_path: Path, written: str, read: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[diffusion]\n{written}\n")
    assert load_config(path).diffusion.cache == read
    assert set_value(path, "diffusion.cache", "prefix") == "prefix"
    assert "prefix_cache" not in path.read_text() and "torch_cache" not in path.read_text()
    assert load_config(path).diffusion.cache == "prefix"


def test_an_old_cache_key_with_a_bad_value_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[diffusion]\ntorch_cache = "triple"\n')
    with pytest.raises(ConfigError, match=r"diffusion\.torch_cache.*diffusion\.cache"):
        load_config(path)
