"""Programs inkctl sends into an engine's image to have the engine's own code read an argv
(``inkctl.execute.deploy.proof``; each engine names its own in its spec, ``proof_program``). Each is one self-contained file run by the image's python3
(standard library plus whatever engine the image holds); none is imported by inkctl itself."""
