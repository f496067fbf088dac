"""The study's charts: the catalogue, what every chart is made of, how each is drawn, and drawing them."""
