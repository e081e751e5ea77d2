# Lets the tests import render_jinja from this directory.
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
