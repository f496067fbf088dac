"""What the user asked for: the study's config read strictly, expanded into points, cut down, with each point's
identity and preset."""
