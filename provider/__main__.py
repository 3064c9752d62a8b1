"""The gemma4-t4 component provider: Pulumi runs this with the engine's address; it serves the package
schema and constructs the components for programs in any Pulumi language."""

from gemma4_t4.components.package import main

if __name__ == "__main__":
    main()
