"""The recall operations of the second design (to come)."""
