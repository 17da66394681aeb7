"""Read the world: Delta tables (deltalake -> pyarrow), sink manifests, checkpoint logs."""
