"""Commands on paper, without hosts: validate, plan, recipes, import, init."""
