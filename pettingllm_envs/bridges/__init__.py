"""Bridges: envs from libraries researchers already use (TextArena, reasoning-gym) behind the project's env API."""
