# Enables pytester for the plugin's own tests (pytest_plugins is only honoured in the root conftest).
pytest_plugins = ["pytester"]
