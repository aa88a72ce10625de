"""HubClient against the stand-in Hub: search, file lists, header estimates by range reads,
and each failure as one clear line. The stand-in serves the real SmolLM2 and Gemma files."""

from __future__ import annotations

import pytest

from app.models.hub import GatedRepo, HubClient, HubOffline, HubUnreachable, RepoNotFound
from inference.gguf.memory_estimate import estimate_memory
from inference.gguf.reader import read_gguf_header, read_gguf_header_prefix
from tests.support.hub_repos import (
    GATED_REPO,
    GEMMA_FILE,
    GEMMA_REPO,
    QUANT_FILES,
    QUANTS_REPO,
    SMOL_FILE,
    SMOL_REPO,
    SPLIT_DIR,
    SPLIT_PREFIX,
)
from tests.support.hub_standin import TOKEN

pytest_plugins = ["tests.support.hub_fixtures"]

pytestmark = pytest.mark.model  # the stand-in serves the real model files


def test_search_finds_gguf_repos_with_the_hubs_summary(hub):
    repos = HubClient(hub.url).search("gemma")
    assert [r.repo_id for r in repos] == [GEMMA_REPO, GATED_REPO, QUANTS_REPO]  # most downloaded first
    gemma, gated, _quants = repos
    assert (gemma.downloads, gemma.likes, gemma.gated) == (9000, 70, False)
    assert gated.gated is True
    assert gemma.architecture == "gemma3" and gemma.context_length == 32768
    assert gemma.last_modified is not None and gemma.last_modified.year == 2026
    # What huggingface_hub asked for: the GGUF filter and the expanded fields.
    listing = next(s for s in hub.seen if s.path == "/api/models")
    assert listing.method == "GET"


def test_search_limit_and_no_match(hub):
    assert len(HubClient(hub.url).search("chorus-test", limit=2)) == 2
    assert HubClient(hub.url).search("no-such-model-anywhere") == []


def test_files_lists_gguf_files_with_sizes_hashes_quants_and_groups_a_split(hub, model_path, split_parts):
    files = HubClient(hub.url).files(SMOL_REPO)
    assert len(files) == 2  # README.md left out; the split's two parts are one file
    by_name = {f.name: f for f in files}
    single = by_name[SMOL_FILE]
    assert single.quant == "Q4_1"
    assert single.size_bytes == model_path.stat().st_size
    assert single.parts[0].sha256 == hub.repo(SMOL_REPO).find(SMOL_FILE).sha256
    assert single.revision is not None and len(single.revision) == 40
    split = by_name[f"{SPLIT_DIR}/{SPLIT_PREFIX}-00001-of-00002.gguf"]
    assert [p.filename for p in split.parts] == [f"{SPLIT_DIR}/{p.name}" for p in split_parts]
    assert split.size_bytes == sum(p.stat().st_size for p in split_parts)
    assert split.quant == "Q4_1"


def test_estimate_reads_only_the_header_by_range_and_matches_the_local_estimate(hub, gemma_path):
    client = HubClient(hub.url)
    gemma = client.files(GEMMA_REPO)[0]
    estimate = client.estimate(gemma, n_ctx=2048, gpu_layers=0)
    local = estimate_memory(read_gguf_header(gemma_path), n_ctx=2048, gpu_layers=0)
    assert estimate is not None
    assert (estimate.weights_bytes, estimate.kv_bytes) == (local.weights_bytes, local.kv_bytes)
    ranged = hub.cdn_requests(GEMMA_REPO, GEMMA_FILE)
    assert ranged and all(s.range is not None for s in ranged)
    fetched = sum(n for name, n in hub.sent if name == GEMMA_FILE)
    assert fetched < gemma.size_bytes / 10  # the header, not the model
    # Another context size: the same header, no request.
    hub.reset()
    longer = client.estimate(gemma, n_ctx=8192, gpu_layers=0)
    assert longer is not None and longer.kv_bytes == 4 * estimate.kv_bytes
    assert hub.seen == []


def test_a_server_that_ignores_range_still_gives_the_header_without_the_whole_file(hub, gemma_path):
    hub.ignore_range = True
    client = HubClient(hub.url)
    gemma = client.files(GEMMA_REPO)[0]
    estimate = client.estimate(gemma, n_ctx=2048, gpu_layers=0)
    local = estimate_memory(read_gguf_header(gemma_path), n_ctx=2048, gpu_layers=0)
    assert estimate is not None and estimate.weights_bytes == local.weights_bytes
    assert sum(n for name, n in hub.sent if name == GEMMA_FILE) < gemma.size_bytes / 2  # stopped reading


def test_a_header_is_read_from_a_prefix_only_once_the_prefix_holds_it(model_path):
    data = model_path.read_bytes()[: 4 << 20]
    size = model_path.stat().st_size
    assert read_gguf_header_prefix(data[:1000], model_path.name, size) is None
    header = read_gguf_header_prefix(data, model_path.name, size)
    local = read_gguf_header(model_path)
    assert header is not None
    assert (header.metadata, header.tensors, header.data_offset) == (local.metadata, local.tensors, local.data_offset)


def test_a_second_quant_of_a_model_is_estimated_from_the_first_ones_header(hub):
    client = HubClient(hub.url)
    first, second = client.files(QUANTS_REPO)
    assert (first.name, second.name) == QUANT_FILES and (first.quant, second.quant) == ("Q4_K_M", "Q5_K_M")
    exact = client.estimate(first, n_ctx=4096, gpu_layers=0)
    requests = len(hub.seen)
    derived = client.estimate(second, n_ctx=4096, gpu_layers=0)
    assert len(hub.seen) == requests  # no header read for the sibling
    assert exact is not None and derived == exact  # the same bytes here, so the same figures


def test_estimate_of_a_split_model_counts_every_parts_tensors(hub, model_path):
    client = HubClient(hub.url)
    files = {f.name: f for f in client.files(SMOL_REPO)}
    whole = client.estimate(files[SMOL_FILE], n_ctx=1024, gpu_layers=0)
    split = client.estimate(files[f"{SPLIT_DIR}/{SPLIT_PREFIX}-00001-of-00002.gguf"], n_ctx=1024, gpu_layers=0)
    assert whole is not None and split is not None
    assert split.kv_bytes == whole.kv_bytes
    # The same tensors, less the header bytes the split moved around (well under 1%).
    assert abs(split.weights_bytes - whole.weights_bytes) < whole.weights_bytes / 100


def test_a_gated_repos_header_needs_the_token_too(hub):
    (file,) = HubClient(hub.url).files(GATED_REPO)
    with pytest.raises(GatedRepo):
        HubClient(hub.url).estimate(file, n_ctx=1024)
    assert HubClient(hub.url, token=TOKEN).estimate(file, n_ctx=1024, gpu_layers=0) is not None


def test_unknown_repo_is_one_line(hub):
    with pytest.raises(RepoNotFound) as raised:
        HubClient(hub.url, token="hf_someone").files("chorus-test/no-such-repo")
    assert "\n" not in str(raised.value) and "chorus-test/no-such-repo" in str(raised.value)


def test_unknown_repo_without_a_login_may_be_private(hub):
    # The Hub answers 401 to an anonymous caller for a repo it will not show.
    with pytest.raises(GatedRepo, match="HF_TOKEN"):
        HubClient(hub.url).files("chorus-test/no-such-repo")


def test_server_errors_are_unreachable_with_the_status(hub):
    # files() (model_info: one request); search() gets the same answer after list_models'
    # own retries (utils/_pagination.py uses http_backoff: 5 tries, about 23 s).
    hub.fail_status = 503
    with pytest.raises(HubUnreachable) as raised:
        HubClient(hub.url).files(GEMMA_REPO)
    assert "503" in str(raised.value) and "\n" not in str(raised.value)



def test_offline_mode_makes_no_request(hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets at import
    with pytest.raises(HubOffline, match="HF_HUB_OFFLINE") as raised:
        HubClient(hub.url).search("gemma")
    assert "\n" not in str(raised.value)
    assert hub.seen == []
