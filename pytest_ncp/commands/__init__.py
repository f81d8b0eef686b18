"""Sub-commands of ``ncp`` beyond the core ones; each module has ``register(subparsers)``."""
