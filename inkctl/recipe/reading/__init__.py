"""A YAML file read into a recipe: positions, overrides, pydantic's errors in the document's words."""
