"""The rank's NVML helpers against a fake NVML (pure logic: link counting, averaging)."""

import time

import pytest

from engine.probe import nvml_device


class FakeNvml:
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, links_up: int | None, util=(50.0, 70.0)):
        self.links_up, self.util = links_up, list(util)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if self.links_up is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")  # a GeForce card: no NVLink at all
        return 1 if link < self.links_up else 0

    def nvmlDeviceGetUtilizationRates(self, handle):
        class Rates:
            gpu = self.util[0] if len(self.util) == 1 else self.util.pop(0)

        return Rates()


def _use(monkeypatch, fake):
    monkeypatch.setattr(nvml_device, "handle_for_cuda_device", lambda index: (fake, "handle") if fake else None)


@pytest.mark.parametrize("links_up, expected", [(18, 18), (12, 12), (None, 0)])
def test_link_facts_count_active_nvlinks(monkeypatch, links_up, expected):
    _use(monkeypatch, FakeNvml(links_up))
    facts = nvml_device.link_facts(0)
    assert facts == {"nvlink_links": expected, "pcie_gen": 5, "pcie_width": 16}


def test_without_nvml_nothing_is_invented(monkeypatch):
    _use(monkeypatch, None)
    assert nvml_device.link_facts(0) == {"nvlink_links": None, "pcie_gen": None, "pcie_width": None}
    with nvml_device.UtilizationSampler(0) as sampler:
        pass
    assert sampler.mean() is None
    assert nvml_device.UtilizationSampler(None).mean() is None  # CPU rank


def test_utilization_is_the_mean_of_the_samples(monkeypatch):
    monkeypatch.setattr(nvml_device, "SAMPLE_INTERVAL_S", 0.01)
    _use(monkeypatch, FakeNvml(0, util=(40.0, 60.0, 80.0)))
    with nvml_device.UtilizationSampler(0) as sampler:
        deadline = time.monotonic() + 120  # a bound on a hang: the loop ends at the 4th sample
        while len(sampler._samples) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    # 40, 60, then 80 repeated: the mean of what was sampled
    samples = sampler._samples
    assert samples[:3] == [40.0, 60.0, 80.0]
    assert sampler.mean() == pytest.approx(sum(samples) / len(samples))
