# Enables pytester for the plugin's own tests (pytest_plugins is only honoured in the root conftest).
pytest_plugins = ["pytester"]

# pytester's in-process runs restore sys.modules afterwards; PyYAML's C extension does not
# survive being imported twice in one process (nodes lose their tags), so import it up front.
import yaml  # noqa: E402, F401
