"""The donor game across generations (Vallinder & Hughes 2024)."""

from scenarios.donor.config import DonorConfig
from scenarios.donor.model import DonorModel

__all__ = ["DonorConfig", "DonorModel"]
