"""A small JSON Schema validator for the keywords results.schema.json uses
(type, const, enum, required, properties, additionalProperties, items,
minimum, pattern, and $ref to "#/$defs/<name>"). Returns a list of
problems, empty when valid."""

import re

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, t):
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[t])


def validate(value, schema, path="$", root=None) -> list:
    root = schema if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return validate(value, root["$defs"][name], path, root)
    problems = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, t) for t in types):
            return [f"{path}: {type(value).__name__} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        problems.append(f"{path}: {value} < {schema['minimum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        problems.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}: missing {key}")
        props = schema.get("properties", {})
        for key, v in value.items():
            if key in props:
                problems += validate(v, props[key], f"{path}.{key}", root)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{path}: unexpected member {key}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            problems += validate(v, schema["items"], f"{path}[{i}]", root)
    return problems
