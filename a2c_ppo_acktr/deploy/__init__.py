"""A trained policy out of its run: played back from its checkpoint (``playback``: enjoy.py,
gail_experts/generate.py) and exported as one file that runs with torch alone (``export``)."""
