"""A JSON Schema validator for the subset bench/results.schema.json uses.

type, const, enum, required, properties, patternProperties, additionalProperties, items,
minItems, minimum, maximum, exclusiveMinimum, oneOf and local $ref. The Python environment has
no jsonschema package; when one is installed, the tests use it as well.
"""

import re

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def errors(value, schema, root=None, path="$"):
    """Every violation of `schema` by `value`, as 'path: message' strings."""
    root = schema if root is None else root
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/"), ref
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        found = errors(value, target, root, path)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return found + (errors(value, rest, root, path) if rest else [])
    out = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return [f"{path}: {value!r} is not of type {schema['type']}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in {schema['enum']}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} > {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{path}: {value} <= {schema['exclusiveMinimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                out += errors(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, dict):
        out += _object_errors(value, schema, root, path)
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not errors(value, s, root, path)]
        if len(matches) != 1:
            detail = [errors(value, s, root, path)[:3] for s in schema["oneOf"]]
            out.append(f"{path}: matches {len(matches)} of oneOf (need 1): {detail}")
    return out


def _object_errors(value, schema, root, path):
    out = [f"{path}: missing '{k}'" for k in schema.get("required", []) if k not in value]
    props = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key, item in value.items():
        sub = f"{path}.{key}"
        matched = False
        if key in props:
            matched = True
            out += errors(item, props[key], root, sub)
        for pattern, pattern_schema in patterns.items():
            if re.search(pattern, key):
                matched = True
                out += errors(item, pattern_schema, root, sub)
        if not matched and schema.get("additionalProperties", True) is False:
            out.append(f"{sub}: not allowed by the schema")
    return out
