"""What runs: the models (torchvision by name, or a user's factory), the image subset, and the one
definition of a step (loss, optimizer, autocast) that estimate, timing and profiling all run.

Imports only the base modules.
"""
