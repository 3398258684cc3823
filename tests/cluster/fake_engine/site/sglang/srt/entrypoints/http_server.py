"""SGLang's HTTP server entry, played by the fake engine: where the real one starts serving
(and where inkctl's argv proof stops)."""


def launch_server(server_args):
    from fake_engine.sglang import serve

    serve(server_args)
