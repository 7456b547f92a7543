"""medallion: a streaming lakehouse on Delta Lake."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("medallion")
except PackageNotFoundError:  # the source tree on sys.path, not installed (a workspace's copy)
    __version__ = "0+unknown"
