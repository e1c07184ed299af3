"""The engine facade: lifecycle, writes, reads, background workers, calibration."""
