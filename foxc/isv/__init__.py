"""The ISV bus: named float32 slots in mapped-pinned memory that kernels read and write."""
from .bus import IsvBus
from .registry import N_SLOTS, SLOTS, Slot, slot_index

__all__ = ["IsvBus", "N_SLOTS", "SLOTS", "Slot", "slot_index"]
