"""`sharpen models pull|rm|info|use|list` against a loopback server in the Hub's layout.

The real huggingface_hub client downloads from tests/hub_server.py through HF_ENDPOINT into an HF cache
under the test's HF_HOME; nothing of huggingface_hub is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hub_server import FakeHub, HubFile

from app.cli import main
from app.service import SharpenService
from app.storage.config import ConfigError, load_config
from app.storage.paths import sharpen_paths
from models.catalogue import CatalogueEntry, entry_from_table
from models.errors import MissingModelFile
from models.fit import DISK_MARGIN_BYTES, DoesNotFit, Machine, check_fit
from models.hub import IntegrityError, PullError, PullProgress

CHUNK = 10 * 1024 * 1024  # huggingface_hub writes downloads in chunks of this size


def add_entries(entries: str) -> None:
    path = sharpen_paths().config_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(entries, encoding="utf-8")


def service() -> SharpenService:
    paths = sharpen_paths()
    return SharpenService(load_config(paths.config_file), paths)


TINY_DRAFT = """
[catalogue.tiny-draft]
role = "draft"
engine = "llama-diffusion"
source = "hf:acme/tiny-draft-GGUF/tiny-draft.gguf"
format = "gguf"
needs_ram_gib = 0.1
description = "A tiny diffusion GGUF served by the test hub."
"""


def test_pull_reports_progress_and_lands_in_the_hf_cache(
    hub: FakeHub, tiny_cacheable_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content = tiny_cacheable_path.read_bytes()
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(content)})
    add_entries(TINY_DRAFT)
    events: list[PullProgress] = []
    result = service().models.pull("tiny-draft", progress=events.append)
    assert result.downloaded_files == 1 and result.verified_files == 1
    assert result.path.read_bytes() == content
    assert str(result.path).startswith(str(tmp_path / "hf" / "hub" / "models--acme--tiny-draft-GGUF"))
    assert events[-1].done_bytes == events[-1].total_bytes == len(content)
    assert [e.done_bytes for e in events] == sorted(e.done_bytes for e in events)
    # The CLI: listed as present, described from the file itself, used for drafts, drafting.
    assert main(["models", "list", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["tiny-draft"]["present"] and listed["llada-8b-instruct-q4km"]["present"] is False
    assert main(["models", "info", "tiny-draft", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["file"]["architecture"] == "llama" and info["present"] is True
    assert main(["models", "use", "tiny-draft", "--for", "draft"]) == 0
    capsys.readouterr()
    assert main(["draft", "Write a note.", "--tokens", "16", "--steps", "4", "--engine", "diffusion", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "tiny-draft"


def test_the_cli_shows_progress_and_a_second_pull_uses_the_cache(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(os.urandom(300_000))})
    add_entries(TINY_DRAFT)
    assert main(["models", "pull", "tiny-draft"]) == 0
    out, err = capsys.readouterr()
    assert "downloaded 1 file(s)" in out and "1 file(s) verified" in out
    assert "tiny-draft: tiny-draft.gguf [1/1] 100.0%" in err
    gets = len(hub.downloads("tiny-draft.gguf"))
    assert main(["models", "pull", "tiny-draft"]) == 0
    assert "already in the cache" in capsys.readouterr().out
    assert len(hub.downloads("tiny-draft.gguf")) == gets


def test_a_dropped_connection_resumes_where_it_stopped(hub: FakeHub) -> None:
    content = os.urandom(CHUNK + 2_000_000)
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(content, drop_after=CHUNK + 500_000, drops=1)})
    add_entries(TINY_DRAFT)
    result = service().models.pull("tiny-draft")
    assert result.path.read_bytes() == content
    ranges = [r.range for r in hub.downloads("tiny-draft.gguf")]
    assert ranges == [None, f"bytes={CHUNK}-"]


def test_a_corrupted_download_is_rejected_and_removed(hub: FakeHub) -> None:
    repo = hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(os.urandom(200_000), corrupt=True)})
    add_entries(TINY_DRAFT)
    with pytest.raises(IntegrityError, match="corrupt and was removed"):
        service().models.pull("tiny-draft")
    blobs = list((Path(os.environ["HF_HOME"]) / "hub" / "models--acme--tiny-draft-GGUF" / "blobs").iterdir())
    assert blobs == []
    with pytest.raises(MissingModelFile, match=r"not downloaded yet.*sharpen models pull tiny-draft"):
        service().models.resolve("tiny-draft")
    repo.files["tiny-draft.gguf"].corrupt = False
    assert service().models.pull("tiny-draft").downloaded_files == 1


def test_the_disk_check_counts_the_bytes_the_hub_serves_less_what_an_interrupted_pull_left(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    size = CHUNK + 2_000_000
    served = HubFile(os.urandom(size), drop_after=CHUNK + 100_000, drops=1, gone_after_drops=True)
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": served})
    add_entries(TINY_DRAFT + "size_bytes = 50_000_000_000\n")  # the catalogue's figure is not what is served
    free = {"bytes": size + DISK_MARGIN_BYTES - 1}
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: shutil._ntuple_diskusage(10**12, 10**12, free["bytes"]))

    assert main(["models", "pull", "tiny-draft"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sharpen: error: refusing to download tiny-draft: it needs 12 MiB")
    assert "`--force`" in err[0] and hub.downloads("tiny-draft.gguf") == []

    free["bytes"] = 10**12
    with pytest.raises(PullError):  # the server goes away after CHUNK bytes are on disk
        service().models.pull("tiny-draft")
    served.gone_after_drops = False
    free["bytes"] = size - CHUNK + DISK_MARGIN_BYTES  # room for the rest, not for the whole file
    assert service().models.pull("tiny-draft").path.read_bytes() == served.content
    assert hub.downloads("tiny-draft.gguf")[-1].range == f"bytes={CHUNK}-"


def test_the_catalogue_sha256_is_enforced(hub: FakeHub) -> None:
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(b"x" * 1000, lfs=False)})
    add_entries(TINY_DRAFT + 'sha256 = "' + "0" * 64 + '"\n')
    with pytest.raises(IntegrityError, match=r"sha256 is .*expected 0000"):
        service().models.pull("tiny-draft")


def test_offline_mode_is_served_from_the_cache(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(os.urandom(1000))})
    add_entries(TINY_DRAFT)
    with pytest.raises(PullError, match="offline mode is on"):
        service().models.pull("tiny-draft", offline=True)
    assert hub.requests == []
    service().models.pull("tiny-draft")
    requests = len(hub.requests)
    assert service().models.pull("tiny-draft", offline=True).downloaded_files == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert service().models.pull("tiny-draft").downloaded_files == 0
    assert len(hub.requests) == requests


def test_missing_repos_and_files_are_named(hub: FakeHub) -> None:
    hub.add("acme/tiny-draft-GGUF", {"other.gguf": HubFile(b"y" * 10)})
    add_entries(
        TINY_DRAFT + '\n[catalogue.nowhere]\nrole = "draft"\nengine = "llama-diffusion"\n'
        'source = "hf:acme/does-not-exist/x.gguf"\n'
    )
    with pytest.raises(PullError, match=r"acme/tiny-draft-GGUF/tiny-draft\.gguf does not exist"):
        service().models.pull("tiny-draft")
    with pytest.raises(PullError, match="repository acme/does-not-exist was not found"):
        service().models.pull("nowhere")


def test_no_network_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    add_entries(TINY_DRAFT)
    with pytest.raises(PullError, match=r"cannot reach http://127\.0\.0\.1:9"):
        service().models.pull("tiny-draft")


def test_a_checkpoint_pull_takes_weights_config_and_tokenizer_but_no_code(
    hub: FakeHub, llada_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {p.name: HubFile(p.read_bytes(), lfs=p.suffix == ".safetensors") for p in llada_checkpoint.iterdir()}
    files["modeling_llada.py"] = HubFile(b"raise SystemExit('remote code must never run')", lfs=False)
    files["pytorch_model.bin"] = HubFile(b"pickle", lfs=True)
    hub.add("acme/tiny-llada", files)
    add_entries(
        '[catalogue.tiny-llada]\nrole = "draft"\nengine = "torch-diffusion"\nbackend = "torch"\n'
        'source = "hf:acme/tiny-llada"\nformat = "hf-safetensors"\nquantization = "nf4"\n'
    )
    result = service().models.pull("tiny-llada")
    assert sorted(p.name for p in result.path.iterdir()) == sorted(p.name for p in llada_checkpoint.iterdir())
    assert result.verified_files == len(list(llada_checkpoint.iterdir()))
    assert main(["models", "use", "tiny-llada", "--for", "draft"]) == 0
    from engines.diffusion.hf.backend import TorchDiffusionBackend

    engine = service().engines.diffusion()
    assert isinstance(engine.backend, TorchDiffusionBackend)
    assert engine.backend.backend == "torch" and engine.backend.loaded.quantization == "nf4"  # the entry's
    assert service().models.pull("tiny-llada", offline=True).path == result.path
    capsys.readouterr()
    assert main(["models", "rm", "tiny-llada"]) != 0
    assert "in use for draft" in capsys.readouterr().err
    assert main(["models", "use", "sharpen-draft", "--for", "draft"]) == 0
    assert main(["models", "rm", "tiny-llada"]) == 0
    assert "freed" in capsys.readouterr().out
    assert not any(result.path.iterdir())


BIG = """
[catalogue.too-big]
role = "draft"
engine = "llama-diffusion"
source = "hf:acme/tiny-draft-GGUF/tiny-draft.gguf"
needs_ram_gib = 100000.0
needs_vram_gib = 90000.0
"""


def test_models_that_do_not_fit_are_refused_unless_forced(
    hub: FakeHub, tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.add("acme/tiny-draft-GGUF", {"tiny-draft.gguf": HubFile(tiny_cacheable_path.read_bytes())})
    add_entries(BIG)
    assert main(["models", "pull", "too-big"]) != 0
    err = capsys.readouterr().err
    assert "refusing to download too-big: too-big needs 100000.0 GiB of RAM or 90000.0 GiB of GPU memory" in err
    assert "--force" in err and hub.requests == []
    assert main(["models", "pull", "too-big", "--force"]) == 0
    with pytest.raises(DoesNotFit, match="refusing to use too-big"):
        service().use_model("draft", "too-big")
    add_entries(BIG + '\n[models]\ndraft = "too-big"\n')
    with pytest.raises(DoesNotFit, match=r"refusing to load too-big.*models\.check_fit false"):
        service().engines.diffusion()
    capsys.readouterr()
    assert main(["models", "use", "too-big", "--for", "draft", "--force"]) == 0
    assert "models.check_fit = false" in capsys.readouterr().out
    assert load_config(sharpen_paths().config_file).models.check_fit is False
    assert service().engines.diffusion().model_name == "too-big"


def test_fit_verdicts() -> None:
    entry = CatalogueEntry("m", "draft", "llama-diffusion", "hf:a/b/c.gguf", needs_ram_gib=6.0, needs_vram_gib=5.5)
    gib = 1024**3
    assert check_fit(entry, Machine(8 * gib, 16 * gib, 0, "")).where == "cpu"
    assert check_fit(entry, Machine(2 * gib, 16 * gib, 6 * gib, "RTX")).where == "gpu"
    verdict = check_fit(entry, Machine(2 * gib, 16 * gib, 4 * gib, "RTX"))
    assert not verdict.fits and "RTX with 4.0 GiB free" in verdict.reason


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('role = "draft"\nengine = "llama-diffusion"\n', "needs source"),
        ('role = "writer"\nengine = "llama-ar"\nsource = "path:/x.gguf"\n', "role must be one of"),
        ('role = "draft"\nengine = "llama-ar"\nsource = "ftp:/x"\n', "source must start with"),
        ('role = "draft"\nengine = "llama-ar"\nsource = "hf:acme/repo"\n', "names its file"),
        ('role = "draft"\nengine = "llama-ar"\nsource = "path:/x"\nsize = 3\n', "unknown keys"),
        ('role = "draft"\nengine = "llama-ar"\nsource = "path:/x"\nneeds_ram_gib = "lots"\n', "must be a float"),
        ('role = "draft"\nengine = "llama-ar"\nsource = "path:/x"\ndrafts_position = 7\n', "must be -1"),
    ],
)
def test_bad_user_entries_are_named(table: str, message: str) -> None:
    add_entries("[catalogue.mine]\n" + table)
    with pytest.raises(ConfigError, match=message):
        load_config(sharpen_paths().config_file)


def test_a_user_entry_can_point_at_a_local_file(tiny_cacheable_path: Path) -> None:
    add_entries(
        f'[catalogue.local]\nrole = "draft"\nengine = "llama-diffusion"\nsource = "path:{tiny_cacheable_path}"\n'
    )
    assert service().models.resolve("local").path == tiny_cacheable_path
    with pytest.raises(PullError, match="a local model"):
        service().models.pull("local")
    entry = entry_from_table("x", {"role": "draft", "engine": "llama-ar", "source": "path:/a"}, "t", builtin=False)
    assert not entry.is_hub


def test_a_pulled_checkpoint_is_served_from_the_cache_when_the_hub_is_unreachable(
    hub: FakeHub, llada_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add("acme/tiny-llada", {p.name: HubFile(p.read_bytes()) for p in llada_checkpoint.iterdir()})
    add_entries(
        '[catalogue.tiny-llada]\nrole = "draft"\nengine = "torch-diffusion"\nsource = "hf:acme/tiny-llada"\n'
        'format = "hf-safetensors"\n'
    )
    first = service().models.pull("tiny-llada")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    again = service().models.pull("tiny-llada")
    assert again.path == first.path and again.downloaded_files == 0
