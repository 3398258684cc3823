"""Several engine groups behind one router: fleets, gateway files, prefill/decode, rolling updates."""
