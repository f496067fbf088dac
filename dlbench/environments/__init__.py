"""The frameworks' environments: built from the pins in envs/, chosen per point, site interpreters probed."""
