"""The one error a user's bad stack config raises: it names the key and the fix."""

PROJECT = "gemma4-t4"


class ConfigError(ValueError):
    """A stack config value that cannot work, refused before any resource is registered."""

    def __init__(self, key: str, problem: str, fix: str):
        # A key is qualified when its name (before any .path) has a namespace: aws:region is,
        # labels.aws:owner (a label named aws:owner) is not.
        self.key = key if ":" in key.split(".", 1)[0] else f"{PROJECT}:{key}"
        self.problem = problem
        self.fix = fix
        super().__init__(f"{self.key}: {problem}\n  fix: {fix}")
