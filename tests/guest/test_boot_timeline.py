"""The boot benchmark's arithmetic (timeline.py): the longest chain through a first boot's parts, by the work's own
dependencies, whatever order the guest ran them in."""

from __future__ import annotations

from guest import timeline


def parts(seconds: dict[str, float], order: list[str] | None = None) -> list[timeline.Part]:
    """Parts of SECONDS, run one after another in ORDER (default: the dependencies' order)."""
    at, out = 0.0, []
    for name in order or list(timeline.NEEDS):
        out.append(timeline.Part(name, at, at + seconds[name]))
        at += seconds[name]
    return out


SECONDS = {"bootstrap": 60, "provision": 40, "driver": 360, "venv": 200, "model": 60, "reboot": 20,
           "after the reboot": 10, "vLLM start": 60}


def test_the_longest_chain_runs_through_the_driver_or_the_network_whichever_is_longer():
    chain_s, chain = timeline.longest_chain(parts(SECONDS))
    assert chain_s == 60 + 40 + 360 + 20 + 10 + 60
    assert chain == ["bootstrap", "provision", "driver", "reboot", "after the reboot", "vLLM start"]
    slow_link = {**SECONDS, "venv": 400, "model": 300}
    chain_s, chain = timeline.longest_chain(parts(slow_link))
    assert chain_s == 60 + 40 + 400 + 300 + 60 and chain[2:4] == ["venv", "model"]


def test_a_boot_that_runs_its_parts_one_after_another_reports_its_ratio_over_the_chain():
    """The old guest's order (the driver, then the venv, the reboot, the model inside vLLM's start): its first boot
    is the sum of the parts, 1.47 x the chain here, and the report says so."""
    serial = parts(SECONDS, ["bootstrap", "provision", "driver", "venv", "reboot", "after the reboot", "model",
                             "vLLM start"])
    text = timeline.report(serial, 0.0, serial[-1].end)
    assert "sum of the parts: 810 s" in text and "longest chain: 550 s" in text
    assert "first boot / longest chain: 1.47" in text


def test_the_models_download_ends_with_its_last_file_not_a_later_listing():
    """vLLM's online start lists the repo again once it loads (the old guest's bench run): that is no download."""
    class Network:
        @staticmethod
        def requests() -> list[str]:
            return ["wheels GET /torch.whl 200 5.0", "hub GET /api/models/o/m 200 10.0",
                    "hub HEAD /o/m/resolve/abc/model.safetensors 200 11.0",
                    "hub GET /o/m/resolve/abc/model.safetensors 200 70.0",
                    "hub GET /api/models/o/m/tree/main?recursive=true&expand=false 200 110.0"]

    assert timeline.download(Network(), "hub") == (10.0, 70.0)
    assert timeline.download(Network(), "nvidia") is None
