"""The live performance panel (View → Performance panel): its charts, laid out in fixed tiles."""
