"""The donor game across generations (Vallinder & Hughes 2024)."""

from scenarios.donor.model import DonorConfig, DonorModel

__all__ = ["DonorConfig", "DonorModel"]
